/* Compiled with -std=c99 -pedantic -Werror: the public header is strict C99. */
#include <genie.h>

int genie_header_c99_probe(void);
int genie_header_c99_probe(void) { return GENIE_ABI_VERSION + (int)sizeof(genie_status_t); }
