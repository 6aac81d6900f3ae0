package backend

// crashHook, when set, is called with the name of each step of a sequence
// that changes files (Restore, Stage, Install, DiscardStaged), just before
// the step is taken. Tests in this package set it to copy the directory
// there, as a process killed at that moment would leave it. It is nil
// outside those tests, which do not run in parallel.
var crashHook func(step string)

func crashPoint(step string) {
	if crashHook != nil {
		crashHook(step)
	}
}
