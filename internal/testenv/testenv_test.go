package testenv

import "testing"

func TestRequired(t *testing.T) {
	t.Setenv("TICKCAST_REQUIRE", "root, tshark,qemu")
	for need, want := range map[string]bool{"root": true, "tshark": true, "qemu": true, "prometheus": false, "": false} {
		if got := Required(need); got != want {
			t.Errorf("Required(%q) = %v, want %v", need, got, want)
		}
	}
	t.Setenv("TICKCAST_REQUIRE", "")
	if Required("root") {
		t.Error("empty TICKCAST_REQUIRE requires root")
	}
}
