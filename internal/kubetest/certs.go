package kubetest

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"
)

type pki struct {
	caPEM                                []byte
	caFile, certFile, keyFile, saKeyFile string
}

// A CA, or a certificate it signed, with its key; all ECDSA P-256 (fast to
// generate), valid from an hour ago for ten years.
type issued struct {
	cert *x509.Certificate
	der  []byte
	key  *ecdsa.PrivateKey
}

// newCA makes a self-signed CA named cn.
func newCA(cn string) (*issued, error) {
	now := time.Now()
	return issue(&x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: cn},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(10 * 365 * 24 * time.Hour),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature | x509.KeyUsageCRLSign,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}, nil)
}

// issue signs tmpl with a new key, by ca (self-signed when ca is nil).
func issue(tmpl *x509.Certificate, ca *issued) (*issued, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	parent, signer := tmpl, key
	if ca != nil {
		parent, signer = ca.cert, ca.key
	}
	if tmpl.NotAfter.IsZero() {
		now := time.Now()
		tmpl.NotBefore, tmpl.NotAfter = now.Add(-time.Hour), now.Add(10*365*24*time.Hour)
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, parent, &key.PublicKey, signer)
	if err != nil {
		return nil, err
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, err
	}
	return &issued{cert: cert, der: der, key: key}, nil
}

func (i *issued) certPEM() []byte {
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: i.der})
}

func (i *issued) keyPEM() ([]byte, error) {
	der, err := x509.MarshalPKCS8PrivateKey(i.key)
	if err != nil {
		return nil, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}), nil
}

// writeFiles writes each path's data, readable by the owner only.
func writeFiles(files map[string][]byte) error {
	for path, data := range files {
		if err := os.WriteFile(path, data, 0o600); err != nil {
			return err
		}
	}
	return nil
}

// writePKI generates, with Go's crypto (no openssl), a CA, the API server's
// serving certificate signed by it, and the service-account signing key,
// written under dir/pki.
func writePKI(dir string, moreIPs ...net.IP) (*pki, error) {
	d := filepath.Join(dir, "pki")
	if err := os.MkdirAll(d, 0o700); err != nil {
		return nil, err
	}
	ca, err := newCA("kubetest-ca")
	if err != nil {
		return nil, err
	}
	serving, err := issue(&x509.Certificate{
		SerialNumber: big.NewInt(2),
		Subject:      pkix.Name{CommonName: "kube-apiserver"},
		KeyUsage:     x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		DNSNames:     []string{"localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc", "kubernetes.default.svc.cluster.local"},
		IPAddresses:  append([]net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback, net.IPv4(10, 0, 0, 1)}, moreIPs...),
	}, ca)
	if err != nil {
		return nil, err
	}
	servingKey, err := serving.keyPEM()
	if err != nil {
		return nil, err
	}
	saKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	saDER, err := x509.MarshalECPrivateKey(saKey)
	if err != nil {
		return nil, err
	}
	p := &pki{
		caPEM:     ca.certPEM(),
		caFile:    filepath.Join(d, "ca.crt"),
		certFile:  filepath.Join(d, "apiserver.crt"),
		keyFile:   filepath.Join(d, "apiserver.key"),
		saKeyFile: filepath.Join(d, "sa.key"),
	}
	return p, writeFiles(map[string][]byte{
		p.caFile:    p.caPEM,
		p.certFile:  serving.certPEM(),
		p.keyFile:   servingKey,
		p.saKeyFile: pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: saDER}),
	})
}

// frontProxy is the aggregation layer's client identity: a CA of its own
// and the certificate the API server presents, as front-proxy-client, when
// it proxies to an extension API server (metrics-server), which trusts
// the request headers it sets only from that CA and that name.
type frontProxy struct {
	caFile, certFile, keyFile string
}

// frontProxyClient is the name the extension servers accept.
const frontProxyClient = "front-proxy-client"

func writeFrontProxy(dir string) (*frontProxy, error) {
	d := filepath.Join(dir, "pki")
	ca, err := newCA("kubetest-front-proxy-ca")
	if err != nil {
		return nil, err
	}
	client, err := issue(&x509.Certificate{
		SerialNumber: big.NewInt(2),
		Subject:      pkix.Name{CommonName: frontProxyClient},
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}, ca)
	if err != nil {
		return nil, err
	}
	key, err := client.keyPEM()
	if err != nil {
		return nil, err
	}
	fp := &frontProxy{caFile: filepath.Join(d, "front-proxy-ca.crt"), certFile: filepath.Join(d, "front-proxy-client.crt"), keyFile: filepath.Join(d, "front-proxy-client.key")}
	return fp, writeFiles(map[string][]byte{fp.caFile: ca.certPEM(), fp.certFile: client.certPEM(), fp.keyFile: key})
}
