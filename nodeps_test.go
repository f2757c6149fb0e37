package mercure_test

import (
	"os/exec"
	"strings"
	"testing"
)

// Importing the mercure package never pulls in a metrics library: the
// promhub sub-package alone depends on client_golang.
func TestNoPrometheusDependency(t *testing.T) {
	t.Parallel()
	out, err := exec.Command("go", "list", "-deps", ".").Output()
	if err != nil {
		t.Skipf("go list: %v", err)
	}
	for _, pkg := range strings.Fields(string(out)) {
		if strings.Contains(pkg, "prometheus") {
			t.Errorf("the mercure package depends on %s", pkg)
		}
	}
}
