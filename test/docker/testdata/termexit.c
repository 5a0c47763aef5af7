/*
 * termexit: a container's init whose main thread exits while a worker
 * thread runs on (as Go servers and JVMs can do), so the thread-group leader
 * is a zombie while the process lives; the engine then cannot signal it.
 * SIGTERM is handled (an init in a pid namespace gets no SIGTERM it has no
 * handler for): the process exits 42, so a delivered SIGTERM shows in the
 * container's exit code. Built with gcc -static for an image FROM scratch.
 */
#include <pthread.h>
#include <signal.h>
#include <unistd.h>

static void onterm(int sig) {
	(void)sig;
	_exit(42);
}

static void *worker(void *arg) {
	(void)arg;
	for (;;)
		pause();
	return NULL;
}

int main(void) {
	struct sigaction sa = {0};
	sa.sa_handler = onterm;
	if (sigaction(SIGTERM, &sa, NULL) != 0)
		return 1;
	pthread_t t;
	if (pthread_create(&t, NULL, worker, NULL) != 0)
		return 1;
	pthread_exit(NULL);
}
