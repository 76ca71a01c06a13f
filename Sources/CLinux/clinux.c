// The functions are static inline in include/clinux.h; SwiftPM wants one source file.
#include "clinux.h"
