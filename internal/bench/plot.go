package bench

import (
	"bytes"
	"encoding/xml"
	"fmt"
	"io"
	"math"
)

// palette colours the policies in report order, one colour each: the
// colour-blind-safe Okabe-Ito set (its yellow left out, unreadable on
// white) and then Paul Tol's muted colours, twelve in all, enough for every
// policy and two-router row of the demo. A report of more policies than
// colours repeats them from the start.
var palette = []string{"#999999", "#E69F00", "#56B4E9", "#009E73", "#D55E00", "#CC79A7", "#0072B2", "#000000",
	"#882255", "#44AA99", "#999933", "#332288"}

// colours gives each of the report's policies its colour: the rr
// baseline the palette's grey wherever it stands, the others the rest of
// the palette in report order (the deployed configuration first, as the
// command orders it), so the policy the eye should find is never grey.
func colours(rep Report) []string {
	out := make([]string, len(rep.Policies))
	next := 1
	for i, s := range rep.Policies {
		if s.Policy == PolicyRR {
			out[i] = palette[0]
			continue
		}
		out[i] = palette[next%len(palette)]
		next++
	}
	return out
}

// Plot geometry: two panels side by side.
const (
	plotW, plotH             = 960, 460
	panelTop, panelH         = 50, 300
	cdfLeft, cdfW            = 70, 480
	barLeft, barW            = 640, 280
	axisColour, gridColour   = "#333333", "#dddddd"
	minTTFTms, decadesMaxLog = 1.0, 7
	// The legend under the distributions: legendPerRow entries of
	// legendW pixels a row.
	legendPerRow, legendW = 5, 96
)

// WritePlot draws the report as SVG: on the left each policy's TTFT
// distribution (cumulative share of requests against TTFT, log scale), on
// the right its output throughput.
func WritePlot(w io.Writer, rep Report) error {
	var b bytes.Buffer
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" font-family="sans-serif" font-size="12">`+"\n", plotW, plotH)
	fmt.Fprintf(&b, `<rect width="%d" height="%d" fill="white"/>`+"\n", plotW, plotH)
	text(&b, plotW/2, 22, "middle", 15, fmt.Sprintf("%s mode, %s: %d prompts, concurrency %d, %d replicas",
		rep.Mode, rep.Workload.Dataset, rep.Workload.NumPrompts, rep.Workload.MaxConcurrency, rep.Workload.Replicas))
	colour := colours(rep)
	cdf(&b, rep, colour)
	bars(&b, rep, colour)
	b.WriteString("</svg>\n")
	_, err := w.Write(b.Bytes())
	return err
}

// cdf draws the TTFT distributions on a log axis spanning the data's decades.
func cdf(b *bytes.Buffer, rep Report, colour []string) {
	lo, hi := math.Inf(1), 0.0
	for _, s := range rep.Policies {
		if len(s.TTFTs) > 0 {
			lo, hi = min(lo, s.TTFTs[0]), max(hi, s.TTFTs[len(s.TTFTs)-1])
		}
	}
	if hi == 0 {
		return
	}
	d0 := math.Floor(math.Log10(max(lo, minTTFTms)))
	d1 := math.Min(math.Ceil(math.Log10(max(hi, minTTFTms*10))), d0+decadesMaxLog)
	x := func(ms float64) float64 {
		return cdfLeft + (math.Log10(max(ms, minTTFTms))-d0)/(d1-d0)*cdfW
	}
	y := func(share float64) float64 { return panelTop + (1-share)*panelH }
	text(b, cdfLeft+cdfW/2, panelTop-10, "middle", 13, "TTFT distribution (share of requests at or below)")
	for d := d0; d <= d1; d++ {
		xx := x(math.Pow(10, d))
		line(b, xx, panelTop, xx, panelTop+panelH, gridColour)
		text(b, int(xx), panelTop+panelH+16, "middle", 11, msLabel(math.Pow(10, d)))
	}
	for _, q := range []float64{0, 0.25, 0.5, 0.75, 1} {
		line(b, cdfLeft, y(q), cdfLeft+cdfW, y(q), gridColour)
		text(b, cdfLeft-6, int(y(q))+4, "end", 11, fmt.Sprintf("%.0f%%", 100*q))
	}
	text(b, cdfLeft+cdfW/2, panelTop+panelH+34, "middle", 12, "time to first token (log scale)")
	for i, s := range rep.Policies {
		if len(s.TTFTs) == 0 {
			continue
		}
		fmt.Fprintf(b, `<polyline fill="none" stroke="%s" stroke-width="2" points="`, colour[i])
		// At most ~400 points per curve: the shape, not every request.
		step := max(1, len(s.TTFTs)/400)
		for j := 0; j < len(s.TTFTs); j += step {
			fmt.Fprintf(b, "%.1f,%.1f ", x(s.TTFTs[j]), y(float64(j+1)/float64(len(s.TTFTs))))
		}
		fmt.Fprintf(b, "%.1f,%.1f\"/>\n", x(s.TTFTs[len(s.TTFTs)-1]), y(1))
		ly, lx := panelTop+panelH+56+18*(i/legendPerRow), cdfLeft+(i%legendPerRow)*legendW
		fmt.Fprintf(b, `<rect x="%d" y="%d" width="14" height="4" fill="%s"/>`+"\n", lx, ly-4, colour[i])
		text(b, lx+18, ly, "start", 12, s.Policy)
	}
}

// bars draws output throughput per policy, each bar's value above it and
// its policy slanted under the axis, so that neither runs into its
// neighbour's however many policies share the panel.
func bars(b *bytes.Buffer, rep Report, colour []string) {
	top := 0.0
	for _, s := range rep.Policies {
		top = max(top, s.OutputThroughput)
	}
	if top == 0 || len(rep.Policies) == 0 {
		return
	}
	text(b, barLeft+barW/2, panelTop-10, "middle", 13, "output throughput (tokens/s)")
	line(b, barLeft, panelTop+panelH, barLeft+barW, panelTop+panelH, axisColour)
	slot := float64(barW) / float64(len(rep.Policies))
	for i, s := range rep.Policies {
		h := s.OutputThroughput / top * (panelH - 20)
		bx := barLeft + float64(i)*slot + slot*0.15
		fmt.Fprintf(b, `<rect x="%.1f" y="%.1f" width="%.1f" height="%.1f" fill="%s"/>`+"\n",
			bx, panelTop+panelH-h, slot*0.7, h, colour[i])
		cx := int(bx + slot*0.35)
		// A value wider than its slot (about 6.5 px a digit at 11 px) stands upright.
		value := fmt.Sprintf("%.0f", s.OutputThroughput)
		if float64(len(value))*6.5 > slot {
			rotated(b, cx+4, int(panelTop+panelH-h)-4, "start", 11, -90, value)
		} else {
			text(b, cx, int(panelTop+panelH-h)-4, "middle", 11, value)
		}
		rotated(b, cx+4, panelTop+panelH+14, "end", 12, -40, s.Policy)
	}
}

func msLabel(ms float64) string {
	if ms >= 1000 {
		return fmt.Sprintf("%gs", ms/1000)
	}
	return fmt.Sprintf("%gms", ms)
}

func line(b *bytes.Buffer, x1, y1, x2, y2 float64, colour string) {
	fmt.Fprintf(b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="%s"/>`+"\n", x1, y1, x2, y2, colour)
}

// text writes an escaped label.
func text(b *bytes.Buffer, x, y int, anchor string, size int, s string) {
	rotated(b, x, y, anchor, size, 0, s)
}

// rotated writes an escaped label turned by degrees about its anchor point.
func rotated(b *bytes.Buffer, x, y int, anchor string, size, degrees int, s string) {
	fmt.Fprintf(b, `<text x="%d" y="%d" text-anchor="%s" font-size="%d"`, x, y, anchor, size)
	if degrees != 0 {
		fmt.Fprintf(b, ` transform="rotate(%d %d %d)"`, degrees, x, y)
	}
	b.WriteString(">")
	_ = xml.EscapeText(b, []byte(s)) // writes to a bytes.Buffer, which cannot fail
	b.WriteString("</text>\n")
}
