// Package agentcr is the node agents' side of their custom resource: in a
// cluster the NRI and eBPF providers run as DaemonSets, read what the
// engine asks of them from a NodeAgentConfig (written by the kubernetes
// provider) and report back in its status, each agent its own node's
// entry.
package agentcr

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
)

// GVR is the NodeAgentConfig resource.
var GVR = schema.GroupVersionResource{Group: "setpoint.dev", Version: "v1alpha1", Resource: "nodeagentconfigs"}

// Client is one node's agent on one NodeAgentConfig.
type Client struct {
	Dyn             dynamic.Interface
	Namespace, Name string
	// Node is this agent's node: its status entry's key.
	Node string
	// Now is the clock of the reports.
	Now func() time.Time
}

// Config is what the engine asks of the agents.
type Config struct {
	Agent        string
	NodeSelector map[string]string
	Config       json.RawMessage
	// Generation is the resource's: report it once acted on.
	Generation int64
}

// ErrNoConfig is a NodeAgentConfig that does not exist (yet).
var ErrNoConfig = errors.New("no NodeAgentConfig")

// Get reads the configuration.
func (c *Client) Get(ctx context.Context) (Config, error) {
	u, err := c.Dyn.Resource(GVR).Namespace(c.Namespace).Get(ctx, c.Name, metav1.GetOptions{})
	if err != nil {
		return Config{}, fmt.Errorf("nodeagentconfig %s/%s: %w", c.Namespace, c.Name, err)
	}
	return decode(u)
}

// Report writes this node's entry of the status: the generation acted
// on, "ok" or what is wrong, and what the agent observes. A server-side
// apply of the status subresource by this node's field manager: it owns
// its entry only, so agents never overwrite each other.
func (c *Client) Report(ctx context.Context, generation int64, message string, observed any) error {
	now := time.Now
	if c.Now != nil {
		now = c.Now
	}
	entry := map[string]any{"name": c.Node, "observedGeneration": generation, "message": message,
		"updated": now().UTC().Format(time.RFC3339)}
	if observed != nil {
		b, err := json.Marshal(observed)
		if err != nil {
			return err
		}
		var x any
		if err := json.Unmarshal(b, &x); err != nil {
			return err
		}
		entry["observed"] = x
	}
	obj := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": GVR.Group + "/" + GVR.Version, "kind": "NodeAgentConfig",
		"metadata": map[string]any{"name": c.Name, "namespace": c.Namespace},
		"status":   map[string]any{"nodes": []any{entry}},
	}}
	_, err := c.Dyn.Resource(GVR).Namespace(c.Namespace).ApplyStatus(ctx, c.Name, obj, metav1.ApplyOptions{FieldManager: "setpoint-agent/" + c.Node, Force: true})
	if err != nil {
		return fmt.Errorf("reporting node %s on nodeagentconfig %s/%s: %w", c.Node, c.Namespace, c.Name, err)
	}
	return nil
}
