/* Prints, every 20 ms, what this process's clocks read: CLOCK_REALTIME
   (as date +%s.%N would), gettimeofday, time and CLOCK_MONOTONIC, all
   through libc and so the vDSO. Built dynamic and static by the tests.
   With an argument N it stops after N lines. */
#include <stdio.h>
#include <stdlib.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

int main(int argc, char **argv) {
	long n = argc > 1 ? atol(argv[1]) : -1;
	setvbuf(stdout, NULL, _IOLBF, 0);
	for (; n != 0; n--) {
		struct timespec rt, mono;
		struct timeval tv;
		clock_gettime(CLOCK_REALTIME, &rt);
		gettimeofday(&tv, NULL);
		time_t t = time(NULL);
		clock_gettime(CLOCK_MONOTONIC, &mono);
		printf("%ld.%09ld %ld.%06ld %ld %ld.%09ld\n", (long)rt.tv_sec, rt.tv_nsec,
		       (long)tv.tv_sec, (long)tv.tv_usec, (long)t, (long)mono.tv_sec, mono.tv_nsec);
		usleep(20000);
	}
	return 0;
}
