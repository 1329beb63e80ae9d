// `loft studio` in the foreground: serve, print the URL to open (with its token, as Jupyter
// does), and on Ctrl-C or SIGTERM stop serving and let running jobs checkpoint before exiting (a
// second signal kills them).
#pragma once
#include "studio/options.h"

namespace loft::studio {

void run_studio(const StudioOptions& options);

}  // namespace loft::studio
