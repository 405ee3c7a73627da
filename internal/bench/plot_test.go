package bench

import (
	"bytes"
	"encoding/xml"
	"io"
	"testing"
)

// TestPlotGivesEveryDemoPolicyItsOwnColour draws the demo's eight policies
// in the command's order (the deployed two routers first) and reads the SVG back as XML:
// every bar has a colour of its own, the same as its distribution's curve,
// and every policy's name under the bars is slanted so that neighbours do
// not overlap.
func TestPlotGivesEveryDemoPolicyItsOwnColour(t *testing.T) {
	var rep Report
	for i, p := range []string{"best@2", "best", "rr", "random", "approx", "approx@2", "llmd", "llmd@2"} {
		rep.Policies = append(rep.Policies, Summary{Policy: p, OutputThroughput: 1000 + 700*float64(i), TTFTs: []float64{10, 100, 1000}})
	}
	var b bytes.Buffer
	if err := WritePlot(&b, rep); err != nil {
		t.Fatal(err)
	}
	bars, curves, slanted := map[string]string{}, map[string]bool{}, map[string]bool{}
	var inText *xml.StartElement
	eachSVGToken(t, &b, func(tok xml.Token) {
		switch el := tok.(type) {
		case xml.StartElement:
			attrs := map[string]string{}
			for _, a := range el.Attr {
				attrs[a.Name.Local] = a.Value
			}
			switch el.Name.Local {
			case "rect":
				if attrs["width"] != "14" && attrs["fill"] != "white" {
					bars[attrs["fill"]] = attrs["height"]
				}
			case "polyline":
				curves[attrs["stroke"]] = true
			case "text":
				if attrs["transform"] != "" {
					inText = &el
				}
			}
		case xml.CharData:
			if inText != nil {
				slanted[string(el)] = true
			}
		case xml.EndElement:
			inText = nil
		}
	})
	if len(bars) != len(rep.Policies) {
		t.Errorf("%d bar colours for %d policies: %v", len(bars), len(rep.Policies), bars)
	}
	for fill := range bars {
		if !curves[fill] {
			t.Errorf("bar colour %s has no distribution curve of the same colour", fill)
		}
	}
	for _, s := range rep.Policies {
		if !slanted[s.Policy] {
			t.Errorf("policy %s: no slanted label under its bar", s.Policy)
		}
	}
	// The baseline is grey wherever it stands, and nothing else is.
	for i, c := range colours(rep) {
		if (rep.Policies[i].Policy == PolicyRR) != (c == palette[0]) {
			t.Errorf("policy %s has colour %s; only rr is %s", rep.Policies[i].Policy, c, palette[0])
		}
	}
}

// eachSVGToken reads a plot as XML, calling fn with every token; a plot that
// is not well-formed fails t.
func eachSVGToken(t *testing.T, r io.Reader, fn func(xml.Token)) {
	t.Helper()
	dec := xml.NewDecoder(r)
	for {
		tok, err := dec.Token()
		if err == io.EOF {
			return
		}
		if err != nil {
			t.Fatalf("the plot is not well-formed XML: %v", err)
		}
		fn(tok)
	}
}
