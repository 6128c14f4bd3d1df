// Package deploy holds no code: its tests check the deployment files at the
// repository root (docker-compose.yml and the Dockerfile it builds).
package deploy
