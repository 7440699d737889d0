package plugin

import (
	"context"
	"encoding/json"
	"log/slog"
	"strings"

	"github.com/hashicorp/go-hclog"
)

// hclogHandler is the plugin side: slog records written as hclog JSON on
// stderr, which go-plugin forwards to the host with their level and fields.
type hclogHandler struct {
	l     hclog.Logger
	attrs []any
}

func (h *hclogHandler) Enabled(context.Context, slog.Level) bool { return true }

func (h *hclogHandler) Handle(_ context.Context, r slog.Record) error {
	args := append([]any(nil), h.attrs...)
	r.Attrs(func(a slog.Attr) bool {
		args = append(args, a.Key, a.Value.Any())
		return true
	})
	switch {
	case r.Level >= slog.LevelError:
		h.l.Error(r.Message, args...)
	case r.Level >= slog.LevelWarn:
		h.l.Warn(r.Message, args...)
	case r.Level >= slog.LevelInfo:
		h.l.Info(r.Message, args...)
	default:
		h.l.Debug(r.Message, args...)
	}
	return nil
}

func (h *hclogHandler) WithAttrs(as []slog.Attr) slog.Handler {
	n := &hclogHandler{l: h.l, attrs: append([]any(nil), h.attrs...)}
	for _, a := range as {
		n.attrs = append(n.attrs, a.Key, a.Value.Any())
	}
	return n
}

func (h *hclogHandler) WithGroup(string) slog.Handler { return h }

var lifecycle = map[string]bool{
	"plugin process exited": true, "starting plugin": true, "plugin started": true,
	"waiting for RPC address": true, "using plugin": true, "plugin address": true,
}

// slogWriter is the host side: go-plugin writes the provider's log lines
// (re-encoded as hclog JSON) here, and they go into setpoint's log under
// the provider's name.
type slogWriter struct {
	provider string
}

func (w slogWriter) Write(p []byte) (int, error) {
	for _, line := range strings.Split(strings.TrimSpace(string(p)), "\n") {
		var m map[string]any
		if json.Unmarshal([]byte(line), &m) != nil {
			slog.Info(line, "provider", w.provider)
			continue
		}
		msg, _ := m["@message"].(string)
		lvl := slog.LevelInfo
		switch m["@level"] {
		case "error":
			lvl = slog.LevelError
		case "warn":
			lvl = slog.LevelWarn
		case "debug", "trace":
			lvl = slog.LevelDebug
		}
		if lifecycle[msg] && lvl < slog.LevelError {
			lvl = slog.LevelDebug // go-plugin's own start/stop chatter
		}
		args := []any{"provider", w.provider}
		for k, v := range m {
			if !strings.HasPrefix(k, "@") {
				args = append(args, k, v)
			}
		}
		slog.Log(context.Background(), lvl, msg, args...)
	}
	return len(p), nil
}
