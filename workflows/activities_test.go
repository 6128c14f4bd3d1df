package workflows

import "github.com/evalflow/evalflow/activities"

// a names the worker's activity methods for the tests' mocks; the workflows
// themselves schedule activities by their names in package rollout.
var a *activities.Activities
