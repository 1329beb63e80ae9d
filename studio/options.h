// `loft studio`'s options (app/cmd_studio.cpp registers them).
#pragma once
#include <string>
#include <vector>

namespace loft::studio {

struct StudioOptions {
  std::string host = "127.0.0.1";  // a non-loopback address serves other machines (the token still guards it)
  int port = 7860;                 // 0: any free port (tests)
  std::vector<std::string> roots;  // folders the studio may read (models, data); none: the working directory
  std::string runs = "runs";       // run folders, as finetune's --out
  std::string token;               // empty: a random one from /dev/urandom
  bool open = false;               // open the URL in a browser (xdg-open)
  std::string loft_binary;         // the binary jobs run; empty: this one (/proc/self/exe)
  int threads = 24;                // connections served at once
};

}  // namespace loft::studio
