package container

// PlantedHooks is plantedHooks, for tests.
var PlantedHooks = plantedHooks
