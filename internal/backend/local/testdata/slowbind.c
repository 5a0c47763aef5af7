/*
 * slowbind: a server that writes its pid file first and binds its port
 * only after it has "initialized", as etcd or PostgreSQL do.
 *
 *   slowbind serve PORT PIDFILE MS   write PIDFILE (via .tmp and rename),
 *                                    wait MS milliseconds, then listen on
 *                                    127.0.0.1:PORT and accept forever; a
 *                                    port in use ends it with exit 1 and
 *                                    "slowbind: bind 127.0.0.1:PORT: Address
 *                                    already in use" on stderr.
 *   slowbind probe PORT              exit 0 when something accepts on
 *                                    127.0.0.1:PORT.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

static struct sockaddr_in addr(const char *port) {
	struct sockaddr_in sa;
	memset(&sa, 0, sizeof sa);
	sa.sin_family = AF_INET;
	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	sa.sin_port = htons((unsigned short)atoi(port));
	return sa;
}

int main(int argc, char **argv) {
	if (argc == 3 && strcmp(argv[1], "probe") == 0) {
		struct sockaddr_in sa = addr(argv[2]);
		int fd = socket(AF_INET, SOCK_STREAM, 0);
		return fd >= 0 && connect(fd, (struct sockaddr *)&sa, sizeof sa) == 0 ? 0 : 1;
	}
	if (argc != 5 || strcmp(argv[1], "serve") != 0) {
		fprintf(stderr, "usage: slowbind serve PORT PIDFILE MS | slowbind probe PORT\n");
		return 2;
	}
	char tmp[4096];
	snprintf(tmp, sizeof tmp, "%s.tmp", argv[3]);
	FILE *f = fopen(tmp, "w");
	if (f == NULL || fprintf(f, "%d\n", (int)getpid()) < 0 || fclose(f) != 0 || rename(tmp, argv[3]) != 0) {
		perror("slowbind: writing the pid file");
		return 1;
	}
	long ms = atol(argv[4]);
	struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
	nanosleep(&ts, NULL);
	struct sockaddr_in sa = addr(argv[2]);
	int one = 1;
	int lfd = socket(AF_INET, SOCK_STREAM, 0);
	if (lfd < 0 || setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) != 0 ||
	    bind(lfd, (struct sockaddr *)&sa, sizeof sa) != 0 || listen(lfd, 16) != 0) {
		fprintf(stderr, "slowbind: bind 127.0.0.1:%s: %s\n", argv[2], strerror(errno));
		return 1;
	}
	for (;;) {
		int c = accept(lfd, NULL, NULL);
		if (c >= 0)
			close(c);
	}
}
