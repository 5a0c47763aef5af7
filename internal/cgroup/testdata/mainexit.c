/*
 * mainexit: a process whose main thread exits while another thread runs on,
 * as Go servers and JVMs can do. The thread-group leader is then a zombie
 * while the process lives, and cgroup.kill does not end it (Linux 6.18).
 *
 *   mainexit PIDFILE          a worker thread sleeps forever.
 *   mainexit PIDFILE forks    the worker thread forks a sleeping child every
 *                             2 ms (at most 500), so a kill races with forks.
 *
 * The pid is written to PIDFILE (via PIDFILE.tmp and rename) once the worker
 * runs; then the main thread calls pthread_exit.
 */
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static int forks;

static void *worker(void *arg) {
	(void)arg;
	struct timespec ts = {0, 2000000};
	for (int n = 0; forks && n < 500; n++) {
		pid_t c = fork();
		if (c == 0) {
			for (;;)
				pause();
		}
		nanosleep(&ts, NULL);
	}
	for (;;)
		pause();
	return NULL;
}

int main(int argc, char **argv) {
	if (argc < 2) {
		fprintf(stderr, "usage: mainexit PIDFILE [forks]\n");
		return 2;
	}
	forks = argc > 2 && strcmp(argv[2], "forks") == 0;
	pthread_t t;
	if (pthread_create(&t, NULL, worker, NULL) != 0) {
		perror("mainexit: pthread_create");
		return 1;
	}
	char tmp[4096];
	snprintf(tmp, sizeof tmp, "%s.tmp", argv[1]);
	FILE *f = fopen(tmp, "w");
	if (f == NULL || fprintf(f, "%d\n", (int)getpid()) < 0 || fclose(f) != 0 || rename(tmp, argv[1]) != 0) {
		perror("mainexit: writing the pid file");
		return 1;
	}
	pthread_exit(NULL);
}
