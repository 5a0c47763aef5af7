/*
 * pexit: a multi-threaded "server" whose main thread leaves early.
 *
 * It listens on a loopback port chosen by the kernel, writes the port number
 * to the file named by argv[1] (via argv[1].tmp and rename, so a reader never
 * sees a partial write), starts a thread that keeps the socket and sleeps
 * forever, and then ends its main thread with pthread_exit. The thread-group
 * leader is then a zombie while the process, its socket and its port are
 * still very much alive.
 */
#include <netinet/in.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

static void *holder(void *arg) {
	(void)arg;
	for (;;)
		pause();
	return NULL;
}

int main(int argc, char **argv) {
	if (argc != 2) {
		fprintf(stderr, "usage: pexit PORTFILE\n");
		return 2;
	}
	int fd = socket(AF_INET, SOCK_STREAM, 0);
	struct sockaddr_in sa;
	memset(&sa, 0, sizeof sa);
	sa.sin_family = AF_INET;
	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	sa.sin_port = 0;
	if (fd < 0 || bind(fd, (struct sockaddr *)&sa, sizeof sa) != 0 || listen(fd, 8) != 0) {
		perror("pexit: listen");
		return 1;
	}
	socklen_t len = sizeof sa;
	if (getsockname(fd, (struct sockaddr *)&sa, &len) != 0) {
		perror("pexit: getsockname");
		return 1;
	}
	pthread_t t;
	if (pthread_create(&t, NULL, holder, NULL) != 0) {
		perror("pexit: pthread_create");
		return 1;
	}
	char tmp[4096];
	snprintf(tmp, sizeof tmp, "%s.tmp", argv[1]);
	FILE *f = fopen(tmp, "w");
	if (f == NULL || fprintf(f, "%d\n", ntohs(sa.sin_port)) < 0 || fclose(f) != 0 || rename(tmp, argv[1]) != 0) {
		perror("pexit: writing the port file");
		return 1;
	}
	pthread_exit(NULL);
}
