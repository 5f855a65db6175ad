// goro::Result lives in goro::base now, where every layer sees it; this name stays for
// code written against it.
#pragma once

#include <goro/base/result.hpp>
