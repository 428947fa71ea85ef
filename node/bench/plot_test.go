package bench

import (
	"bytes"
	"image/png"
	"os"
	"testing"
)

func TestWritePlot(t *testing.T) {
	rs := []Result{
		{Mode: ModeInProcess, Sessions: 64, Clients: 64, AppendsPerSec: 120000, Complete: true},
		{Mode: ModeGRPC, Sessions: 64, Clients: 64, AppendsPerSec: 50000, Complete: true},
		{Mode: "adk", Sessions: 64, Clients: 64, AppendsPerSec: 900, Complete: true},
		{Mode: ModeBaseline, Sessions: 64, Clients: 64, AppendsPerSec: 2000},
		{Mode: ModeRaw, Sessions: 64, Clients: 64, AppendsPerSec: 230000, Complete: true},
		{Mode: ModeInProcess, Sessions: 1, Clients: 16, AppendsPerSec: 30000, Complete: true},
		{Mode: ModeRaw, Sessions: 1, Clients: 16, AppendsPerSec: 230000, Complete: true},
	}
	var buf bytes.Buffer
	if err := WritePlot(&buf, "test plot", rs); err != nil {
		t.Fatal(err)
	}
	img, err := png.Decode(bytes.NewReader(buf.Bytes()))
	if err != nil {
		t.Fatal(err)
	}
	if b := img.Bounds(); b.Dx() != plotW || b.Dy() != plotH {
		t.Fatalf("size %v", b)
	}
	// The in-process bar's colour must be on the canvas.
	want := plotColors[0]
	found := false
	for y := 0; y < plotH && !found; y++ {
		for x := 0; x < plotW && !found; x++ {
			r, g, b, _ := img.At(x, y).RGBA()
			found = uint8(r>>8) == want.R && uint8(g>>8) == want.G && uint8(b>>8) == want.B
		}
	}
	if !found {
		t.Error("no in-process bar drawn")
	}
	if out := os.Getenv("BENCH_PLOT_OUT"); out != "" {
		os.WriteFile(out, buf.Bytes(), 0o644)
	}
	if err := WritePlot(&buf, "empty", nil); err == nil {
		t.Error("plotted nothing without an error")
	}
}

// Every mode gets a colour of its own, however many a plot has: the modes
// Run knows (raw-closed had none, and modeColor divided by zero), the
// adapters' and any other name.
func TestWritePlotEveryMode(t *testing.T) {
	modes := append(append([]Mode{}, Modes...), "adk", "adk-serialized", "other", "yet-another", "a-third")
	var rs []Result
	for i, m := range modes {
		rs = append(rs, Result{Mode: m, Sessions: 1, Callers: 2, AppendsPerSec: float64(1000 * (i + 1)), Complete: true})
	}
	var buf bytes.Buffer
	if err := WritePlot(&buf, "every mode", rs); err != nil {
		t.Fatal(err)
	}
	img, err := png.Decode(&buf)
	if err != nil {
		t.Fatal(err)
	}
	onCanvas := map[[3]uint8]bool{}
	b := img.Bounds()
	for y := b.Min.Y; y < b.Max.Y; y++ {
		for x := b.Min.X; x < b.Max.X; x++ {
			r, g, bl, _ := img.At(x, y).RGBA()
			onCanvas[[3]uint8{uint8(r >> 8), uint8(g >> 8), uint8(bl >> 8)}] = true
		}
	}
	colours := map[[3]uint8]Mode{}
	for _, m := range modes {
		c := modeColor(m)
		key := [3]uint8{c.R, c.G, c.B}
		if other, dup := colours[key]; dup {
			t.Errorf("%s and %s share the colour %v", m, other, c)
		}
		colours[key] = m
		if !onCanvas[key] {
			t.Errorf("%s: no bar of its colour %v drawn", m, c)
		}
		if modeColor(m) != c {
			t.Errorf("%s: colour not stable", m)
		}
	}
}
