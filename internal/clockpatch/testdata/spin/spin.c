/* Four threads read the wall clock as fast as they can, so that patching
   and restoring the vDSO meets threads inside it; it prints how far its
   clock is from the true one each 20 ms like clockprint. */
#include <pthread.h>
#include <stdio.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

static void *spin(void *arg) {
	struct timespec ts;
	struct timeval tv;
	for (;;) {
		clock_gettime(CLOCK_REALTIME, &ts);
		gettimeofday(&tv, NULL);
	}
	return arg;
}

int main(void) {
	pthread_t t;
	for (int i = 0; i < 4; i++)
		pthread_create(&t, NULL, spin, NULL);
	setvbuf(stdout, NULL, _IOLBF, 0);
	for (;;) {
		struct timespec rt, mono;
		clock_gettime(CLOCK_REALTIME, &rt);
		clock_gettime(CLOCK_MONOTONIC, &mono);
		printf("%ld.%09ld %ld.%09ld %ld %ld.%09ld\n", (long)rt.tv_sec, rt.tv_nsec, (long)rt.tv_sec, rt.tv_nsec / 1000,
		       (long)rt.tv_sec, (long)mono.tv_sec, mono.tv_nsec);
		usleep(20000);
	}
}
