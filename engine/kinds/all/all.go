// Package all registers every built-in kind's decider: import it for its
// side effect wherever specs are planned.
package all

import (
	// Each registers its decider in an init.
	_ "github.com/setpoint-dev/setpoint/engine/kinds/fleet"
	_ "github.com/setpoint-dev/setpoint/engine/kinds/nfr"
	_ "github.com/setpoint-dev/setpoint/engine/kinds/nodepolicy"
	_ "github.com/setpoint-dev/setpoint/engine/kinds/routegroup"
	_ "github.com/setpoint-dev/setpoint/engine/kinds/schedule"
)
