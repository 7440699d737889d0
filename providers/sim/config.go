package sim

import (
	"encoding/json"
	"fmt"

	"github.com/setpoint-dev/setpoint/cue/spec"
)

// Config returns the sim provider's configuration from an Environment. The
// schema has already filled in its defaults.
func Config(env *spec.Environment) (spec.SimConfig, error) {
	for _, p := range env.Spec.Providers {
		if p.Name != "sim" {
			continue
		}
		var c spec.SimConfig
		if err := json.Unmarshal(p.Config, &c); err != nil {
			return c, fmt.Errorf("%s: sim config: %w", env.Src.PosOf("spec.providers"), err)
		}
		return c, nil
	}
	return spec.SimConfig{}, fmt.Errorf("%s: the Environment has no sim provider", env.Src.Pos)
}
