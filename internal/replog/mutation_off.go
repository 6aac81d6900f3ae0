//go:build !edictmutate

package replog

// mutated is false in every build but the mutation runner's: the checks it
// guards compile to what they say.
func mutated(string) bool { return false }
