//go:build linux

package git

import (
	"os/exec"
	"syscall"
)

// guardScript runs the command in the background and, when the kernel sends
// SIGTERM because this process died, kills its whole process group. The
// group is needed: git hands the HTTP conversation to git-remote-http, which
// would otherwise go on pushing, connection open, after git itself is gone.
// wait's status is git's, so the exit code passes through.
const guardScript = `trap 'kill -KILL 0' TERM; "$@" & wait $!`

// dieWithParent ties git's process group to the life of this process. git
// runs in its own group (so a cancel can kill it whole), which also means a
// SIGKILLed worker would leave its push running after the job's fence (the
// engine's crash tests caught exactly that). The kernel's parent-death
// signal goes to a small sh guard that leads the group. Go notes that the
// signal follows the starting OS thread; the runtime ends threads only for
// goroutines that exit while locked to one, which nothing here does.
func dieWithParent(cmd *exec.Cmd) {
	sh, err := exec.LookPath("sh")
	if err != nil {
		cmd.SysProcAttr.Pdeathsig = syscall.SIGKILL // git alone, better than nothing
		return
	}
	cmd.Args = append([]string{"sh", "-c", guardScript, "sh", cmd.Path}, cmd.Args[1:]...)
	cmd.Path = sh
	cmd.SysProcAttr.Pdeathsig = syscall.SIGTERM
}
