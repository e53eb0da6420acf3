//go:build unix

package git

import (
	"os/exec"
	"syscall"
)

// killGroup makes cmd lead its own process group and makes cancellation
// kill the whole group: git spawns git-remote-http and pack-objects, and a
// cancelled push must take them down too.
func killGroup(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	dieWithParent(cmd)
	cmd.Cancel = func() error {
		return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	}
}
