package activities

import "fmt"

// RolloutKey formats the stable key run/epoch/index/k.
func RolloutKey(runID string, epoch int, index int64, k int) string {
	return fmt.Sprintf("%s/%d/%d/%d", runID, epoch, index, k)
}
