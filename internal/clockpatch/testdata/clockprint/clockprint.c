/* Prints, every 20 ms, what this process's clocks read: CLOCK_REALTIME
   (as date +%s.%N would), gettimeofday, time and CLOCK_MONOTONIC, all
   through libc and so the vDSO. Built dynamic and static by the tests. */
#include <stdio.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

int main(void) {
	setvbuf(stdout, NULL, _IOLBF, 0);
	for (;;) {
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
}
