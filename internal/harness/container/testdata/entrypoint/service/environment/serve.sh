#!/bin/sh
# As an image's entrypoint does: name the service in /etc/hosts, then
# serve the greeting (its first argument, the image's CMD) on port 8080.
echo "127.0.0.1 greeting.internal" >> /etc/hosts
exec perl -MIO::Socket::INET -e '
	$| = 1;
	my $s = IO::Socket::INET->new(LocalAddr => "0.0.0.0", LocalPort => 8080, Listen => 5, ReuseAddr => 1) or die "listen: $!\n";
	print "serving $ARGV[0] on 8080\n";
	while (my $c = $s->accept) { print $c "$ARGV[0]\n"; close $c }
' "$1"
