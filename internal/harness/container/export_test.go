package container

// PlantedHooks is plantedHooks, for tests.
var PlantedHooks = plantedHooks

// SetImageRepo names r's task images under repo, a test's own.
func SetImageRepo(r *Runtime, repo string) { r.repo = repo }
