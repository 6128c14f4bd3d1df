// Package tunneltest runs the server side of tunnels for tests, frps (frp's
// server package) and a Debian OpenSSH sshd, each on loopback or on an
// address the test gives, with ways to look at them from their own side.
package tunneltest
