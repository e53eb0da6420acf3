//go:build unix && !linux

package git

import "os/exec"

// dieWithParent has no portable equivalent outside Linux: a killed worker's
// git may outlive it there.
func dieWithParent(*exec.Cmd) {}
