// Compiled as C++11 with -pedantic -Werror: the public header is valid C++.
#include <genie.h>

int genie_header_cxx_probe();
int genie_header_cxx_probe() { return GENIE_ABI_VERSION + static_cast<int>(sizeof(genie_status_t)); }
