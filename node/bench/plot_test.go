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
