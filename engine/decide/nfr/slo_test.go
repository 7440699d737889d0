package nfr

import (
	"math"
	"math/rand/v2"
	"strings"
	"testing"
)

func near(got, want, tol float64) bool {
	return math.Abs(got-want) <= tol*math.Max(1, math.Abs(want))
}

func TestErlangC(t *testing.T) {
	cases := []struct {
		name string
		c    int
		a    float64
		want float64
	}{
		// M/M/1: an arrival waits exactly when the server is busy, P = ρ.
		{"M/M/1", 1, 0.5, 0.5},
		// c=2, a=1: terms 1, 1; tail a²/2!·2/(2−1) = 1; C = 1/(2+1).
		{"c=2", 2, 1, 1.0 / 3},
		// c=5, a=3: Σₖ₌₀⁴ 3ᵏ/k! = 1+3+4.5+4.5+3.375 = 16.375;
		// 3⁵/5!·5/(5−3) = 2.025·2.5 = 5.0625; C = 5.0625/21.4375 = 81/343
		// ≈ 0.23615.
		{"c=5", 5, 3, 81.0 / 343},
		// c=5, a=4: Σ = 1+4+8+32/3+32/3 = 103/3; tail 4⁵/5!·5 = 128/3;
		// C = 128/231.
		{"c=5 busy", 5, 4, 128.0 / 231},
		{"saturated", 3, 3, 1},
		{"overloaded", 3, 7, 1},
		{"no load", 4, 0, 0},
		{"negative load", 4, -1, 0},
		{"c<1 is M/M/1", 0, 0.5, 0.5},
	}
	for _, tc := range cases {
		if got := ErlangC(tc.c, tc.a); !near(got, tc.want, 1e-12) {
			t.Errorf("%s: ErlangC(%d, %g) = %.15g, want %.15g", tc.name, tc.c, tc.a, got, tc.want)
		}
	}
	for _, tc := range []struct {
		c int
		a float64
	}{{1000, 900}, {1000, 999.9}, {10000, 9900}, {10000, 9000}} {
		got := ErlangC(tc.c, tc.a)
		if !(got > 0 && got < 1) {
			t.Errorf("ErlangC(%d, %g) = %g, want in (0, 1)", tc.c, tc.a, got)
		}
	}
	// Against the factorial form summed in log space (lgamma), outside
	// this package: C(1000, 900) = 5.92670e-4, C(10000, 9900) = 0.222777.
	if got := ErlangC(1000, 900); math.Abs(got/5.9266997e-4-1) > 1e-6 {
		t.Errorf("ErlangC(1000, 900) = %.9g, want 5.9266996e-4", got)
	}
	if got := ErlangC(10000, 9900); math.Abs(got/0.22277693-1) > 1e-6 {
		t.Errorf("ErlangC(10000, 9900) = %.9g, want 0.22277693", got)
	}
	// So light a load that the true value is below the smallest float:
	// it must come out as 0, not NaN.
	if got := ErlangC(10000, 1); got != 0 {
		t.Errorf("ErlangC(10000, 1) = %g, want 0", got)
	}
	// More load never means less waiting.
	prev := 0.0
	for a := 0.5; a < 50; a += 0.5 {
		got := ErlangC(50, a)
		if got < prev {
			t.Fatalf("ErlangC(50, %g) = %g < %g at the previous load", a, got, prev)
		}
		prev = got
	}
}

// textbookTail is the sojourn tail written straight from the formula, for
// checking the cancellation-free rewrite where the textbook form is sound.
func textbookTail(c int, s, lambda, t float64) float64 {
	mu, theta := 1/s, float64(c)/s-lambda
	C := ErlangC(c, lambda*s)
	return (1-C)*math.Exp(-mu*t) + C*(theta*math.Exp(-mu*t)-mu*math.Exp(-theta*t))/(theta-mu)
}

func TestSojournTail(t *testing.T) {
	// M/M/1: T is exponential with rate μ−λ = 10−5, so P(T > 0.3) = e^{−1.5}.
	if got, want := SojournTail(1, 0.1, 5, 0.3), math.Exp(-1.5); !near(got, want, 1e-12) {
		t.Errorf("M/M/1 tail = %.15g, want %.15g", got, want)
	}
	// No traffic: only the service, e^{−t/s}.
	if got, want := SojournTail(4, 0.05, 0, 0.1), math.Exp(-2); !near(got, want, 1e-12) {
		t.Errorf("idle tail = %.15g, want %.15g", got, want)
	}
	for _, tc := range []struct {
		name         string
		c            int
		s, lambda, t float64
		want         float64
	}{
		{name: "unstable", c: 2, s: 0.1, lambda: 20, t: 5, want: 1},
		{name: "overloaded", c: 2, s: 0.1, lambda: 50, t: 5, want: 1},
		{name: "t=0", c: 2, s: 0.1, lambda: 5, t: 0, want: 1},
		{name: "t<0", c: 2, s: 0.1, lambda: 5, t: -1, want: 1},
		{name: "NaN", c: 2, s: 0.1, lambda: math.NaN(), t: 1, want: 1},
		{name: "instant service", c: 2, s: 0, lambda: 5, t: 1, want: 0},
	} {
		if got := SojournTail(tc.c, tc.s, tc.lambda, tc.t); got != tc.want {
			t.Errorf("%s: tail = %g, want %g", tc.name, got, tc.want)
		}
	}

	// Away from θ = μ the rewrite must agree with the textbook form.
	for _, lambda := range []float64{10, 60, 90, 110, 124} {
		for _, tt := range []float64{0.01, 0.1, 0.3} {
			got, want := SojournTail(5, 0.04, lambda, tt), textbookTail(5, 0.04, lambda, tt)
			if !near(got, want, 1e-10) {
				t.Errorf("tail(λ=%g, t=%g) = %.15g, textbook %.15g", lambda, tt, got, want)
			}
		}
	}

	// c=5, s=0.04: θ = 125 − λ equals μ = 25 at λ = 100, where the tail is
	// (1−C)e^{−μt} + C·e^{−μt}(1+μt) with C = C(5, 4) = 128/231. At t = 0.1,
	// μt = 2.5, so it is e^{−2.5}·(1 + 2.5·128/231).
	limit := math.Exp(-2.5) * (1 + 2.5*128.0/231)
	if got := SojournTail(5, 0.04, 100, 0.1); !near(got, limit, 1e-12) {
		t.Errorf("tail at θ=μ = %.15g, want %.15g", got, limit)
	}
	// Either side of it the tail must be continuous, however close: the
	// textbook form loses all its digits here.
	for _, eps := range []float64{1e-13, 1e-11, 1e-9, 1e-7, 1e-5} {
		lo := SojournTail(5, 0.04, 100*(1-eps), 0.1)
		hi := SojournTail(5, 0.04, 100*(1+eps), 0.1)
		if !near(lo, limit, 10*eps+1e-12) || !near(hi, limit, 10*eps+1e-12) || !(lo <= hi) {
			t.Errorf("ε=%g: tail either side of θ=μ = %.15g, %.15g; limit %.15g", eps, lo, hi, limit)
		}
	}
}

func TestSojournQuantile(t *testing.T) {
	// M/M/1 p99 = ln(100)/(μ−λ): μ = 25, λ = 10 → ln(100)/15 ≈ 0.30701.
	if got, want := SojournQuantile(1, 0.04, 10, 0.99), math.Log(100)/15; !near(got, want, 1e-8) {
		t.Errorf("M/M/1 p99 = %.12g, want %.12g", got, want)
	}
	// No traffic: the service's own p99, s·ln(100).
	if got, want := SojournQuantile(8, 0.2, 0, 0.99), 0.2*math.Log(100); !near(got, want, 1e-8) {
		t.Errorf("idle p99 = %.12g, want %.12g", got, want)
	}
	// Median of M/M/1 with μ−λ = 2: ln 2 / 2.
	if got, want := SojournQuantile(1, 0.25, 2, 0.5), math.Ln2/2; !near(got, want, 1e-8) {
		t.Errorf("M/M/1 median = %.12g, want %.12g", got, want)
	}
	if got := SojournQuantile(2, 0.1, 20, 0.99); !math.IsInf(got, 1) {
		t.Errorf("unstable p99 = %g, want +Inf", got)
	}
	// The quantile is where the tail crosses 1−q.
	for _, lambda := range []float64{0, 50, 99, 100, 101, 120, 124.9} {
		p99 := SojournQuantile(5, 0.04, lambda, 0.99)
		if tail := SojournTail(5, 0.04, lambda, p99); !near(tail, 0.01, 1e-6) {
			t.Errorf("λ=%g: tail at p99 %g = %g, want 0.01", lambda, p99, tail)
		}
	}
	prev := 0.0
	for lambda := 0.0; lambda < 60; lambda += 0.5 {
		got := SojournQuantile(3, 0.05, lambda, 0.99)
		if !(got > prev) {
			t.Fatalf("p99 at λ=%g is %g, not above %g at the lower rate", lambda, got, prev)
		}
		prev = got
	}
}

func TestUtilisationBound(t *testing.T) {
	// M/M/1, s = 0.04: p99 = ln 100/(25 − λ) ≤ 0.25 ⇔ λ ≤ 25 − 4·ln 100
	// = 6.5793, ρ = λ·s = 0.26317.
	rho, ok := UtilisationBound(1, 0.04, 0.25, 0.99)
	if want := (25 - 4*math.Log(100)) * 0.04; !ok || math.Abs(rho-want) > 2e-6 {
		t.Errorf("M/M/1 bound = %.7f, %v; want %.7f, true", rho, ok, want)
	}
	// The service alone takes s·ln 100 = 0.184 s at p99, above 0.15.
	if rho, ok := UtilisationBound(4, 0.04, 0.15, 0.99); ok || rho != 0 {
		t.Errorf("infeasible bound = %g, %v; want 0, false", rho, ok)
	}
	if rho, ok := UtilisationBound(4, 0.04, math.Inf(1), 0.99); !ok || rho != MaxUtilisation {
		t.Errorf("an infinite target: %g, %v; want the cap", rho, ok)
	}
	if rho, ok := UtilisationBound(4, 0.04, 100, 0.99); !ok || rho != MaxUtilisation {
		t.Errorf("loose bound = %g, %v; want %g, true", rho, ok, MaxUtilisation)
	}
	for _, tc := range []struct {
		s, target, q float64
	}{{0, 1, 0.99}, {0.04, 0, 0.99}, {0.04, 1, 1}, {0.04, 1, 0}, {math.NaN(), 1, 0.99}, {0.04, math.NaN(), 0.99}} {
		if rho, ok := UtilisationBound(2, tc.s, tc.target, tc.q); ok || rho != 0 {
			t.Errorf("UtilisationBound(2, %g, %g, %g) = %g, %v; want 0, false", tc.s, tc.target, tc.q, rho, ok)
		}
	}
	// More servers at the same service time pool better, so they bear a
	// higher utilisation for the same target.
	r1, _ := UtilisationBound(1, 0.04, 0.3, 0.99)
	r10, _ := UtilisationBound(10, 0.04, 0.3, 0.99)
	if !(r10 > r1) {
		t.Errorf("bound with 10 servers %g not above 1 server %g", r10, r1)
	}
}

func TestUtilisationBoundProperty(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for i := 0; i < 60; i++ {
		c := 1 + rng.IntN(50)
		s := math.Exp(math.Log(1e-3) + rng.Float64()*math.Log(1e3))
		target := s * math.Log(100) * (1 + 1e-3 + 4*rng.Float64())
		rho, ok := UtilisationBound(c, s, target, 0.99)
		if !ok || rho < 0 || rho > MaxUtilisation {
			t.Fatalf("c=%d s=%g target=%g: bound %g, %v", c, s, target, rho, ok)
		}
		at := SojournQuantile(c, s, rho*float64(c)/s, 0.99)
		if at > target*(1+1e-6) {
			t.Errorf("c=%d s=%g target=%g: p99 %g at ρ=%g exceeds target", c, s, target, at, rho)
		}
		if up := rho + 0.01; up < MaxUtilisation {
			if above := SojournQuantile(c, s, up*float64(c)/s, 0.99); !(above > target) {
				t.Errorf("c=%d s=%g target=%g: p99 %g at ρ=%g still within target; bound %g too low", c, s, target, above, up, rho)
			}
		}
	}
}

// nestedBound is UtilisationBound as it was first written: the same
// bisection, whose every step searches for the quantile itself.
func nestedBound(c int, s, target, q float64) float64 {
	n := float64(c)
	return highestMeeting(func(rho float64) bool { return SojournQuantile(c, s, rho*n/s, q) <= target })
}

// The one-tail search (and its memory) answers as the nested bisection
// does, within the search's own precision, whether asked first or again,
// and the same for the same ratio of target to service time.
func TestUtilisationBoundAgreesWithNestedSearch(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for i := 0; i < 300; i++ {
		c := 1 + rng.IntN(64)
		s := math.Exp(math.Log(1e-3) + rng.Float64()*math.Log(1e3))
		q := []float64{0.9, 0.95, 0.99, 0.999}[rng.IntN(4)]
		target := s * math.Log(1/(1-q)) * (1 + 1e-3 + 6*rng.Float64())
		want := nestedBound(c, s, target, q)
		for again := range 2 {
			got, ok := UtilisationBound(c, s, target, q)
			if !ok || math.Abs(got-want) > 2e-6 {
				t.Fatalf("c=%d s=%g target=%g q=%g (asked %d times before): %g, %v; the nested search %g", c, s, target, q, again, got, ok, want)
			}
		}
		if got, _ := UtilisationBound(c, 2*s, 2*target, q); math.Abs(got-want) > 2e-6 {
			t.Fatalf("c=%d, twice the service time and target: %g, want %g", c, got, want)
		}
	}
}

// synthetic is CPU = 120m idle + 4m per req/s over rps 50..400, with a
// deterministic wobble of up to ±noise millicores.
func synthetic(noise float64) (xs, ys []float64) {
	for i, rps := 0, 50.0; rps <= 400; i, rps = i+1, rps+12.5 {
		xs = append(xs, rps)
		ys = append(ys, 120+4*rps+noise*math.Sin(float64(i)*1.7))
	}
	return xs, ys
}

func TestFitLine(t *testing.T) {
	xs, ys := synthetic(0)
	fit, ok := FitLine(xs, ys)
	if !ok || !near(fit.Slope, 4, 1e-9) || !near(fit.Intercept, 120, 1e-9) || !near(fit.R2, 1, 1e-9) || fit.N != 29 {
		t.Errorf("exact line: %+v, %v", fit, ok)
	}
	xs, ys = synthetic(15)
	fit, ok = FitLine(xs, ys)
	if !ok || math.Abs(fit.Slope-4) > 0.05 || math.Abs(fit.Intercept-120) > 10 || fit.R2 < 0.99 {
		t.Errorf("noisy line: %+v, %v", fit, ok)
	}

	// FitMoments from the same moments must give the same line.
	n := float64(len(xs))
	var mx, my, mxx, mxy, myy float64
	for i := range xs {
		mx += xs[i] / n
		my += ys[i] / n
		mxx += xs[i] * xs[i] / n
		mxy += xs[i] * ys[i] / n
		myy += ys[i] * ys[i] / n
	}
	fm, ok := FitMoments(n, mx, my, mxx, mxy, myy)
	if !ok || !near(fm.Slope, fit.Slope, 1e-9) || !near(fm.Intercept, fit.Intercept, 1e-7) || !near(fm.R2, fit.R2, 1e-9) || fm.N != n {
		t.Errorf("FitMoments %+v disagrees with FitLine %+v", fm, fit)
	}

	reject := []struct {
		name   string
		xs, ys []float64
	}{
		{"flat rps", []float64{200, 200, 200, 200}, []float64{900, 910, 880, 905}},
		// x = 100 ± 4: variance 16 under (0.05·100)² = 25.
		{"spread 4%", []float64{96, 104, 96, 104}, []float64{500, 530, 499, 531}},
		{"two points", []float64{50, 400}, []float64{320, 1720}},
		{"no points", nil, nil},
		{"NaN", []float64{50, 100, math.NaN()}, []float64{320, 520, 720}},
		{"Inf", []float64{50, 100, 150}, []float64{320, math.Inf(1), 720}},
		{"lengths differ", []float64{50, 100, 150}, []float64{320, 520}},
	}
	for _, tc := range reject {
		if fit, ok := FitLine(tc.xs, tc.ys); ok {
			t.Errorf("%s: fit %+v accepted", tc.name, fit)
		}
	}
	// x = 100 ± 6: variance 36 over 25, enough.
	if _, ok := FitLine([]float64{94, 106, 94, 106}, []float64{500, 548, 501, 547}); !ok {
		t.Error("spread 6% rejected")
	}
	// A flat y is a perfectly good fit of slope 0, whose R² is 0.
	if fit, ok := FitLine([]float64{50, 100, 150}, []float64{300, 300, 300}); !ok || fit.Slope != 0 || fit.R2 != 0 {
		t.Errorf("flat y: %+v, %v", fit, ok)
	}
}

func TestMarginalCost(t *testing.T) {
	xs, ys := synthetic(15)
	fit, fitOK := FitLine(xs, ys)
	// At 300 req/s the workload burns about 120 + 4·300 = 1320m.
	c, ok := MarginalCost(300, 1320, fit, fitOK)
	if !ok || c.Method != "fit" || math.Abs(c.PerRequest-4) > 0.05 || math.Abs(c.Idle-120) > 15 {
		t.Errorf("fit used: %+v, %v", c, ok)
	}
	if !strings.HasPrefix(c.Why, "marginal 4.0m/req (fit over 29 points, R² 1.00, idle ") || !strings.Contains(c.Why, "m removed)") {
		t.Errorf("fit used: why %q", c.Why)
	}

	// 600m at 100 req/s: mean cost 6m/req.
	cases := []struct {
		name   string
		fit    Fit
		fitOK  bool
		per    float64
		method string
		why    string
	}{
		{"negative slope", Fit{Slope: -1, Intercept: 700, R2: 0.9, N: 20}, true, 6, "mean", "fit slope -1 ≤ 0: mean cost 6m/req (600m / 100 req/s)"},
		{"low R²", Fit{Slope: 4, Intercept: 200, R2: 0.31, N: 20}, true, 6, "mean", "fit R² 0.31 < 0.8: mean cost 6m/req (600m / 100 req/s)"},
		// The decline scenario's early fit: at R² 0.58 it read 180m of the
		// load as idle; the mean cost (6m here) is used instead.
		{"middling R²", Fit{Slope: 4.2, Intercept: 180, R2: 0.58, N: 8}, true, 6, "mean", "fit R² 0.58 < 0.8: mean cost 6m/req"},
		{"R² at the bar", Fit{Slope: 4.2, Intercept: 180, R2: 0.8, N: 8}, true, 4.2, "fit", "marginal 4.2m/req (fit over 8 points, R² 0.80, idle 180m removed)"},
		{"no fit", Fit{N: 2}, false, 6, "mean", "only 2 points to fit: mean cost"},
		{"fit refused", Fit{N: 20}, false, 6, "mean", "no usable fit over 20 points: mean cost"},
		{"slope above mean", Fit{Slope: 10, Intercept: -400, R2: 0.95, N: 20}, true, 6, "fit", "slope 10 lowered to mean"},
		{"slope mostly idle", Fit{Slope: 0.5, Intercept: 550, R2: 0.95, N: 20}, true, 1.5, "fit", "slope 0.5 raised to 25% of mean"},
		{"within bounds", Fit{Slope: 5, Intercept: 100, R2: 0.95, N: 20}, true, 5, "fit", "marginal 5m/req (fit over 20 points, R² 0.95, idle 100m removed)"},
	}
	for _, tc := range cases {
		c, ok := MarginalCost(100, 600, tc.fit, tc.fitOK)
		if !ok || !near(c.PerRequest, tc.per, 1e-12) || c.Method != tc.method || !strings.Contains(c.Why, tc.why) {
			t.Errorf("%s: %+v, %v; want %g by %s, why containing %q", tc.name, c, ok, tc.per, tc.method, tc.why)
		}
		if want := 600 - c.PerRequest*100; !near(c.Idle, want, 1e-9) || c.Idle < 0 {
			t.Errorf("%s: idle %g, want %g", tc.name, c.Idle, want)
		}
	}

	for _, tc := range []struct{ rps, cpu float64 }{{0, 600}, {-1, 600}, {100, -1}, {math.NaN(), 600}, {100, math.Inf(1)}} {
		if c, ok := MarginalCost(tc.rps, tc.cpu, fit, fitOK); ok {
			t.Errorf("MarginalCost(%g, %g) = %+v accepted", tc.rps, tc.cpu, c)
		}
	}
}

func TestFeedback(t *testing.T) {
	cases := []struct {
		name        string
		p99, target float64
		want        float64
	}{
		{"on target", 0.25, 0.25, 1},
		{"twice target", 0.5, 0.25, 1 + 0.5*math.Ln2},
		{"far above", 25, 0.25, 2},
		{"below target", 0.1, 0.25, 1},
		{"no p99", 0, 0.25, 1},
		{"no target", 0.5, 0, 1},
		{"negative", -1, 0.25, 1},
		{"NaN", math.NaN(), 0.25, 1},
		{"Inf", math.Inf(1), 0.25, 1},
	}
	for _, tc := range cases {
		if got := Feedback(tc.p99, tc.target); !near(got, tc.want, 1e-12) {
			t.Errorf("%s: Feedback(%g, %g) = %g, want %g", tc.name, tc.p99, tc.target, got, tc.want)
		}
	}
}

func TestDesignRate(t *testing.T) {
	nan := math.NaN()
	cases := []struct {
		name                      string
		mean, peak, minRPS, floor float64
		want                      float64
		why                       string
	}{
		{"peak", 310, 388, 400, 0.5, 388, "peak 388 req/s"},
		{"mean", 310, 300, 400, 0.5, 310, "mean 310 req/s"},
		{"floor", 100, 150, 400, 0.5, 200, "floor 50% × 400 = 200 req/s"},
		{"peak missing", 310, nan, 400, 0.5, 310, "mean 310 req/s"},
		{"tie goes to peak", 310, 310, 0, 0, 310, "peak 310 req/s"},
		{"floor only", nan, nan, 400, 0.25, 100, "floor 25% × 400 = 100 req/s"},
	}
	for _, tc := range cases {
		got, why := DesignRate(tc.mean, tc.peak, tc.minRPS, tc.floor)
		if got != tc.want || why != tc.why {
			t.Errorf("%s: DesignRate = %g, %q; want %g, %q", tc.name, got, why, tc.want, tc.why)
		}
	}
	if got, why := DesignRate(nan, nan, 0, 0.5); !math.IsNaN(got) || why == "" {
		t.Errorf("nothing known: DesignRate = %g, %q; want NaN with a reason", got, why)
	}
}

func TestSizeForSLO(t *testing.T) {
	// 500m per pod at 4m·s per request: 125 req/s per pod at full CPU;
	// with a 40ms service time that is 125·0.04 = 5 requests in flight,
	// c = 5. The p99 target is 250ms.
	//
	// The bound for c=5, s=0.04, target 0.25 s was computed once, outside
	// this package, by bisection on ρ over the textbook Erlang C (factorial
	// sums) and the textbook sojourn tail: ρ = 0.80966 (λ = 101.2 req/s per
	// pod, just past θ = μ at ρ = 0.8). The grid scan below re-derives it
	// from SojournQuantile alone, independently of UtilisationBound.
	const handRho = 0.80966
	scan := 0.0
	for rho := 0.0; rho < MaxUtilisation; rho += 1e-5 {
		if SojournQuantile(5, 0.04, rho*5/0.04, 0.99) > 0.25 {
			break
		}
		scan = rho
	}
	if math.Abs(scan-handRho) > 2e-5 {
		t.Fatalf("grid scan finds ρ = %.5f, hand value %.5f", scan, handRho)
	}

	z := SizeForSLO(350, 4, 500, 0.04, 0.25, 0)
	if z.PerPod != 125 || z.Servers != 5 || z.ServiceTime != 0.04 || z.Rate != 350 || !z.Feasible || z.Feedback != 1 {
		t.Errorf("sizing: %+v", z)
	}
	if math.Abs(z.Rho-handRho) > 5e-4 {
		t.Errorf("Rho = %.6f, want %.3f", z.Rho, handRho)
	}
	// Raw = 350/(0.80966·125) = 3.4582 → 4 replicas.
	if !near(z.Raw, 350/(z.Rho*125), 1e-12) || math.Abs(z.Raw-3.4582) > 1e-3 || z.Replicas != 4 {
		t.Errorf("Raw %g, Replicas %d; want 3.4582, 4", z.Raw, z.Replicas)
	}

	// A p99 of twice the target: factor 1 + 0.5·ln 2 = 1.3466, 3.4582·1.3466
	// = 4.657 → 5.
	z = SizeForSLO(350, 4, 500, 0.04, 0.25, 0.5)
	if !near(z.Feedback, 1+0.5*math.Ln2, 1e-12) || z.Replicas != 5 {
		t.Errorf("with feedback: %+v; want factor 1.3466, 5 replicas", z)
	}

	// 100ms is under the service's own p99 of 0.04·ln 100 = 184ms: no pod
	// count meets it, so size at 70%: 350/(0.7·125) = 4 exactly, which must
	// not round up to 5.
	z = SizeForSLO(350, 4, 500, 0.04, 0.1, 0)
	if z.Feasible || z.Rho != DefaultUtilisation || z.Replicas != 4 {
		t.Errorf("infeasible: %+v; want not feasible, Rho 0.7, 4 replicas", z)
	}

	// 980/(0.7·350) is 4 exactly, but 980/(0.7·350) in floats is
	// 4.000000000000001, which must not become 5.
	z = SizeForSLO(980, 1, 350, 0.04, 0.1, 0)
	if z.Feasible || z.Rho != DefaultUtilisation || z.Replicas != 4 {
		t.Errorf("exact product: %+v; want not feasible, Rho 0.7, 4 replicas", z)
	}

	// No target: 70%, feasible.
	z = SizeForSLO(350, 4, 500, 0.04, 0, 0)
	if !z.Feasible || z.Rho != DefaultUtilisation || z.Replicas != 4 {
		t.Errorf("no target: %+v", z)
	}

	// No service time: one server and 70%.
	z = SizeForSLO(350, 4, 500, 0, 0.25, 0)
	if z.Servers != 1 || z.Rho != DefaultUtilisation || z.Replicas != 4 {
		t.Errorf("no service time: %+v", z)
	}

	odd := []struct {
		name                                  string
		rate, cost, cpuPerPod, s, target, p99 float64
		want                                  int64
	}{
		{"zero cost", 350, 0, 500, 0.04, 0.25, 0.5, 1},
		{"negative cost", 350, -2, 500, 0.04, 0.25, 0, 1},
		{"no pod CPU", 350, 4, 0, 0.04, 0.25, 0, 1},
		{"no traffic", 0, 4, 500, 0.04, 0.25, 0, 1},
		{"NaN rate", math.NaN(), 4, 500, 0.04, 0.25, 0, 1},
		{"NaN everything", math.NaN(), math.NaN(), math.NaN(), math.NaN(), math.NaN(), math.NaN(), 1},
		{"absurd rate", 1e300, 4, 500, 0.04, 0.25, 0, 1e6},
		{"infinite rate", math.Inf(1), 4, 500, 0.04, 0.25, 0, 1e6},
		{"tiny cost", 350, 1e-300, 500, 0.04, 0.25, 0, 1},
	}
	for _, tc := range odd {
		z := SizeForSLO(tc.rate, tc.cost, tc.cpuPerPod, tc.s, tc.target, tc.p99)
		if z.Replicas != tc.want || math.IsNaN(z.Raw) || math.IsInf(z.Raw, 0) || math.IsNaN(z.Rho) || math.IsInf(z.PerPod, 0) {
			t.Errorf("%s: %+v; want %d replicas and finite numbers", tc.name, z, tc.want)
		}
	}
}
