package storage

// crashHook, when set, is called with the name of each step of a sequence
// that changes files, just before the step is taken. Tests in this package
// set it to stop a sequence at a chosen step (by panicking) and then reopen
// what the sequence left, as after a process killed at that moment: every
// step before it has happened and nothing after it, not even clean-up. It is
// nil outside those tests, which do not run in parallel.
var crashHook func(step string)

func crashPoint(step string) {
	if crashHook != nil {
		crashHook(step)
	}
}
