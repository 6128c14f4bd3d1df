package harness

// oracleScript runs the task's reference solution in place of an agent.
const oracleScript = `: "${EVALFLOW_SOLUTION:?the oracle runs the solution of a task, and this task has none}"; exec bash "$EVALFLOW_SOLUTION/solve.sh"`

// OracleCommand is the command of the oracle harness: it runs the task's
// reference solution, $EVALFLOW_SOLUTION/solve.sh, with bash in the
// workspace. Run it with Spec.Solution set to the task's Solution; a
// verified task it solves scores its full reward, which checks the task
// and the runtime rather than a model.
func OracleCommand() []string {
	return []string{"bash", "-c", oracleScript, "evalflow-oracle"}
}
