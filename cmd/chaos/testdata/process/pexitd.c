/*
 * pexitd: a multi-threaded server whose main thread leaves early, on a
 * port it is given.
 *
 *   pexitd serve PORT PIDFILE   listen on 127.0.0.1:PORT (SO_REUSEADDR, as
 *                               servers do), write the pid file (via .tmp
 *                               and rename), start a thread that keeps the
 *                               socket and accepts, and end the main thread
 *                               with pthread_exit: the thread-group leader is
 *                               then a zombie while the server holds its port.
 *   pexitd probe PORT           exit 0 when something accepts on the port.
 *
 * Used by TestRestartsOfAServerWhoseMainThreadExited.
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

static int lfd;

static void *serve(void *arg) {
	(void)arg;
	for (;;) {
		int c = accept(lfd, NULL, NULL);
		if (c >= 0)
			close(c);
	}
	return NULL;
}

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
	if (argc != 4 || strcmp(argv[1], "serve") != 0) {
		fprintf(stderr, "usage: pexitd serve PORT PIDFILE | pexitd probe PORT\n");
		return 2;
	}
	struct sockaddr_in sa = addr(argv[2]);
	int one = 1;
	lfd = socket(AF_INET, SOCK_STREAM, 0);
	if (lfd < 0 || setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) != 0 ||
	    bind(lfd, (struct sockaddr *)&sa, sizeof sa) != 0 || listen(lfd, 16) != 0) {
		perror("pexitd: listen");
		return 1;
	}
	pthread_t t;
	if (pthread_create(&t, NULL, serve, NULL) != 0) {
		perror("pexitd: pthread_create");
		return 1;
	}
	char tmp[4096];
	snprintf(tmp, sizeof tmp, "%s.tmp", argv[3]);
	FILE *f = fopen(tmp, "w");
	if (f == NULL || fprintf(f, "%d\n", (int)getpid()) < 0 || fclose(f) != 0 || rename(tmp, argv[3]) != 0) {
		perror("pexitd: writing the pid file");
		return 1;
	}
	pthread_exit(NULL);
}
