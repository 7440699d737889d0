package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/setpoint-dev/setpoint/internal/kubetest"
	"github.com/setpoint-dev/setpoint/internal/testutil"
)

// The CI examples promise that a read-only plan needs read-only
// credentials: get and list on what the specs target. On a real API server,
// a ServiceAccount with exactly those verbs plans a change that passes the
// gate with no refusal (a server-side dry run would be a patch, forbidden).
func TestReadOnlyPlanNeedsOnlyGetAndList(t *testing.T) {
	env := kubetest.Shared(t)
	ns := env.Namespace(t)
	prom := checkoutWithSignals(t, env, ns)

	// The documented verbs, and nothing else, for a ServiceAccount.
	ctx := context.Background()
	admin := env.Clientset(t)
	name := "setpoint-plan-ro-" + strings.ToLower(ns)
	rules := []rbacv1.PolicyRule{
		{APIGroups: []string{"apps"}, Resources: []string{"deployments"}, Verbs: []string{"get", "list"}},
		{APIGroups: []string{"autoscaling"}, Resources: []string{"horizontalpodautoscalers"}, Verbs: []string{"get", "list"}},
	}
	if _, err := admin.RbacV1().ClusterRoles().Create(ctx, &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: name}, Rules: rules}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = admin.RbacV1().ClusterRoles().Delete(ctx, name, metav1.DeleteOptions{})
		_ = admin.RbacV1().ClusterRoleBindings().Delete(ctx, name, metav1.DeleteOptions{})
	})
	if _, err := admin.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: name},
		RoleRef:  rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: name},
		Subjects: []rbacv1.Subject{{Kind: "ServiceAccount", Name: "plan", Namespace: ns}}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// A kubeconfig that acts as that ServiceAccount (the admin
	// impersonating it: the authorizer judges the ServiceAccount).
	kc, err := clientcmd.LoadFromFile(env.Kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	for _, u := range kc.AuthInfos {
		u.Impersonate = "system:serviceaccount:" + ns + ":plan"
		u.ImpersonateGroups = []string{"system:serviceaccounts", "system:serviceaccounts:" + ns, "system:authenticated"}
	}
	roKubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
	if err := clientcmd.WriteToFile(*kc, roKubeconfig); err != nil {
		t.Fatal(err)
	}

	dir := t.TempDir()
	files := map[string]string{
		"env.yaml": fmt.Sprintf("apiVersion: setpoint.dev/v1alpha1\nkind: Environment\nmetadata: {name: prod}\nspec:\n  providers: [{name: kubernetes}]\n  signals: {default: prometheus, prometheus: {url: %q}}\n", prom.URL),
		"checkout.yaml": fmt.Sprintf("apiVersion: setpoint.dev/v1alpha1\nkind: NFR\nmetadata: {name: checkout, namespace: %s}\nspec:\n  target: {kind: Deployment, name: checkout}\n"+
			"  memory: {containers: [function]}\n  enforcement: {memory: enforce}\n  safety: {stability: 0s}\n", ns),
	}
	for name, body := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	// The ServiceAccount is allowed what the plan reads once the
	// authorizer has the binding: poll until the read-only plan plans.
	var out, errOut string
	var code int
	testutil.Poll(t, 30*time.Second, 200*time.Millisecond, "a read-only plan with get and list", func() (bool, string) {
		out, errOut, code = runCLI(t, "plan", "--read-only", "--detailed-exitcode", "--kubeconfig", roKubeconfig, dir)
		return code == 2, fmt.Sprintf("exit %d\n%s\n%s", code, out, errOut)
	}, nil)
	if strings.Contains(out+errOut, "forbidden") || !strings.Contains(out, "~ kubernetes:Deployment/"+ns+"/checkout") || strings.Contains(out, "held:") {
		t.Fatalf("the change must pass, with no refusal:\n%s\n%s", out, errOut)
	}
	// The same credentials cannot make the dry run a plan that is not
	// read-only makes: the reason --read-only skips it.
	out, _, _ = runCLI(t, "plan", "--kubeconfig", roKubeconfig, "--lock-timeout", "0s", dir)
	if !strings.Contains(out, "forbidden") {
		t.Fatalf("with the dry run, read-only credentials are refused (patch): this test would prove nothing\n%s", out)
	}
}
