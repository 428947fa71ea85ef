package bench

import (
	"fmt"
	"hash/fnv"
	"image"
	"image/color"
	"image/draw"
	"image/png"
	"io"
	"math"
	"slices"
	"strings"

	"golang.org/x/image/font"
	"golang.org/x/image/font/basicfont"
	"golang.org/x/image/math/fixed"
)

// The plot is a grouped bar chart of appends/s — one group per workload,
// one bar per mode — on a log scale, because the modes differ by orders of
// magnitude. It is drawn with the standard library's image packages and
// x/image's fixed 7×13 font: a handful of rectangles and labels did not
// justify a plotting library and its dependency tree.

// plotOrder is the order of bars in a group; unknown modes follow.
var plotOrder = []Mode{ModeInProcess, ModeGRPC, ModeGRPCStream, ModeGRPCUnary, "adk", "adk-serialized", ModeBaseline, ModeRaw, ModeRawClosed}

var plotColors = []color.RGBA{
	{0x1f, 0x77, 0xb4, 0xff}, {0x2c, 0xa0, 0x2c, 0xff}, {0xd6, 0x27, 0x28, 0xff},
	{0xff, 0x7f, 0x0e, 0xff}, {0x7f, 0x7f, 0x7f, 0xff}, {0x94, 0x67, 0xbd, 0xff},
	{0x8c, 0x56, 0x4b, 0xff}, {0xe3, 0x77, 0xc2, 0xff}, {0xbc, 0xbd, 0x22, 0xff},
	{0x17, 0xbe, 0xcf, 0xff},
}

const (
	plotW, plotH            = 1000, 560
	marginL, marginR        = 70, 20
	marginT, marginB        = 60, 70
	maxBarW, groupPad, cell = 64, 40, 7 // cell: the font's advance
)

// WritePlot draws rs as a PNG to w. Results of the same workload and mode
// (there should be one) are drawn side by side in input order.
func WritePlot(w io.Writer, title string, rs []Result) error {
	if len(rs) == 0 {
		return fmt.Errorf("bench: nothing to plot")
	}
	modes := plotModes(rs)
	var groups []string // workloads, in ASCII: the font has no "×"
	for _, r := range rs {
		if g := plotWorkload(r); !slices.Contains(groups, g) {
			groups = append(groups, g)
		}
	}
	lo, hi := math.Inf(1), 0.0
	for _, r := range rs {
		if r.AppendsPerSec > 0 {
			lo, hi = min(lo, r.AppendsPerSec), max(hi, r.AppendsPerSec)
		}
	}
	if hi == 0 {
		return fmt.Errorf("bench: no result has a rate to plot")
	}
	decLo, decHi := math.Floor(math.Log10(lo)), math.Ceil(math.Log10(hi))
	if decHi == decLo {
		decHi++
	}

	img := image.NewRGBA(image.Rect(0, 0, plotW, plotH))
	draw.Draw(img, img.Bounds(), image.White, image.Point{}, draw.Src)
	grey, black := color.RGBA{0xdd, 0xdd, 0xdd, 0xff}, color.RGBA{0, 0, 0, 0xff}
	top, bottom := marginT, plotH-marginB
	y := func(v float64) int {
		f := (math.Log10(v) - decLo) / (decHi - decLo)
		return bottom - int(f*float64(bottom-top))
	}
	for d := decLo; d <= decHi; d++ {
		yy := y(math.Pow(10, d))
		fill(img, marginL, yy, plotW-marginR, yy+1, grey)
		label := strings.TrimSuffix(strings.Replace(si(math.Pow(10, d)), ".0", "", 1), ".0")
		text(img, marginL-8-cell*len(label), yy+4, label, black)
	}
	fill(img, marginL, top, marginL+1, bottom, black)
	fill(img, marginL, bottom, plotW-marginR, bottom+1, black)
	text(img, marginL, 20, title, black)
	text(img, 8, top-12, "appends/s (log)", black)

	groupW := (plotW - marginL - marginR) / len(groups)
	barW := max(1, min(maxBarW, (groupW-groupPad)/len(modes)))
	incomplete := false
	for gi, g := range groups {
		x0 := marginL + gi*groupW + (groupW-barW*len(modes))/2
		for mi, m := range modes {
			for _, r := range rs {
				if plotWorkload(r) != g || r.Mode != m || r.AppendsPerSec <= 0 {
					continue
				}
				x := x0 + mi*barW
				fill(img, x+2, y(r.AppendsPerSec), x+barW-2, bottom, modeColor(m))
				label := si(r.AppendsPerSec)
				if !r.Complete {
					label += "*"
					incomplete = true
				}
				text(img, x+barW/2-cell*len(label)/2, y(r.AppendsPerSec)-4, label, black)
			}
		}
		text(img, marginL+gi*groupW+groupW/2-cell*len(g)/2, bottom+18, g, black)
	}
	// The legend: one swatch and name per mode, in bar order.
	lx := marginL
	for _, m := range modes {
		fill(img, lx, plotH-30, lx+12, plotH-18, modeColor(m))
		text(img, lx+16, plotH-19, m, black)
		lx += 16 + cell*len(m) + 24
	}
	if incomplete {
		note := "* incomplete: acknowledged messages lost, duplicated or out of order"
		text(img, plotW-marginR-cell*len(note), top-12, note, black)
	}
	return png.Encode(w, img)
}

func plotWorkload(r Result) string { return fmt.Sprintf("S=%d x C=%d", r.Sessions, r.TotalCallers()) }

// modeColor keeps a mode's colour the same in every plot: the modes of
// plotOrder take the palette in order, and any other mode (or one past the
// palette) gets a colour derived from its name, so no mode is ever without
// one, however many a plot has.
func modeColor(m Mode) color.RGBA {
	if i := slices.Index(plotOrder, m); i >= 0 && i < len(plotColors) {
		return plotColors[i]
	}
	h := fnv.New32a()
	h.Write([]byte(m))
	return hueColor(float64(h.Sum32()%360) / 360)
}

// hueColor is a saturated, mid-dark colour of hue h in [0, 1): HSV with
// S=0.65 and V=0.8, dark enough for the black labels above the bars.
func hueColor(h float64) color.RGBA {
	const s, v = 0.65, 0.8
	i := math.Floor(h * 6)
	f := h*6 - i
	p, q, t := v*(1-s), v*(1-f*s), v*(1-(1-f)*s)
	var r, g, b float64
	switch int(i) % 6 {
	case 0:
		r, g, b = v, t, p
	case 1:
		r, g, b = q, v, p
	case 2:
		r, g, b = p, v, t
	case 3:
		r, g, b = p, q, v
	case 4:
		r, g, b = t, p, v
	default:
		r, g, b = v, p, q
	}
	return color.RGBA{uint8(r * 255), uint8(g * 255), uint8(b * 255), 0xff}
}

func plotModes(rs []Result) []Mode {
	var modes []Mode
	for _, m := range plotOrder {
		if slices.ContainsFunc(rs, func(r Result) bool { return r.Mode == m }) {
			modes = append(modes, m)
		}
	}
	for _, r := range rs {
		if !slices.Contains(modes, r.Mode) {
			modes = append(modes, r.Mode)
		}
	}
	return modes
}

// si formats a rate with a k/M suffix: 1234 → "1.2k", 56789 → "57k".
func si(v float64) string {
	switch {
	case v >= 1e6:
		return trim(v/1e6) + "M"
	case v >= 1e3:
		return trim(v/1e3) + "k"
	}
	return trim(v)
}

func trim(v float64) string {
	if v < 10 {
		return fmt.Sprintf("%.1f", v)
	}
	return fmt.Sprintf("%.0f", v)
}

func fill(img *image.RGBA, x0, y0, x1, y1 int, c color.Color) {
	draw.Draw(img, image.Rect(x0, y0, x1, y1), image.NewUniform(c), image.Point{}, draw.Src)
}

func text(img *image.RGBA, x, y int, s string, c color.Color) {
	d := font.Drawer{Dst: img, Src: image.NewUniform(c), Face: basicfont.Face7x13, Dot: fixed.P(x, y)}
	d.DrawString(s)
}
