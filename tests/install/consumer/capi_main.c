/* The C ABI from an installed memcoord: init on the host backend, allocate, write, free, shut down. */
#include <stdio.h>
#include <string.h>

#include "worker/memcoord.h"

int main(void) {
  if (memcoord_init() != 0) {
    fprintf(stderr, "memcoord_init failed: %s\n", memcoord_last_error());
    return 1;
  }
  void* block = memcoord_alloc(NULL, 1 << 20, 0);
  if (block == NULL) {
    fprintf(stderr, "memcoord_alloc failed: %s\n", memcoord_last_error());
    return 1;
  }
  memset(block, 0x5a, 1 << 20);
  if (((unsigned char*)block)[(1 << 20) - 1] != 0x5a) return 1;
  if (memcoord_free(NULL, block) != 0) {
    fprintf(stderr, "memcoord_free failed: %s\n", memcoord_last_error());
    return 1;
  }
  if (memcoord_shutdown() != 0) return 1;
  printf("consumer_capi: allocated, wrote and freed 1 MiB through the installed libmemcoord_capi.so\n");
  return 0;
}
