/*
 * ticker N: a tree of N processes that each wake up every 20 ms, so that
 * whether they run can be seen from outside (their context-switch counts in
 * /proc/PID/status grow only while they run).
 *
 * Of the N-1 children of the first process, every third one calls setsid,
 * and every third one is double-forked (its parent exits at once, so it is
 * reparented to the nearest subreaper): the tree is as scattered across
 * sessions, process groups and parents as a real workload's. Once all N
 * exist, the first process writes "ready" to the file named by argv[2]
 * (via a temporary file and rename).
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static void tick(void) {
	struct timespec ts = {0, 20 * 1000 * 1000};
	for (;;)
		nanosleep(&ts, NULL);
}

int main(int argc, char **argv) {
	if (argc != 3) {
		fprintf(stderr, "usage: ticker N READYFILE\n");
		return 2;
	}
	int n = atoi(argv[1]);
	int ready[2];
	if (pipe(ready) != 0) {
		perror("ticker: pipe");
		return 1;
	}
	for (int i = 1; i < n; i++) {
		pid_t p = fork();
		if (p < 0) {
			perror("ticker: fork");
			return 1;
		}
		if (p == 0) {
			if (i % 3 == 1)
				setsid();
			if (i % 3 == 2) {
				pid_t q = fork();
				if (q != 0)
					_exit(q < 0);
			}
			close(ready[0]);
			if (write(ready[1], "x", 1) != 1)
				_exit(1);
			close(ready[1]);
			tick();
		}
		if (i % 3 == 2)
			waitpid(p, NULL, 0);
	}
	close(ready[1]);
	char c;
	for (int i = 1; i < n; i++)
		if (read(ready[0], &c, 1) != 1)
			return 1;
	char tmp[4096];
	snprintf(tmp, sizeof tmp, "%s.tmp", argv[2]);
	FILE *f = fopen(tmp, "w");
	if (f == NULL || fputs("ready\n", f) < 0 || fclose(f) != 0 || rename(tmp, argv[2]) != 0) {
		perror("ticker: writing the ready file");
		return 1;
	}
	tick();
}
