//go:build !unix

package git

import "os/exec"

// killGroup: without process groups, cancellation kills git itself only.
func killGroup(cmd *exec.Cmd) {}
