// tessera/tessera.h — the whole public API in one include.
#pragma once

#include "tessera/context.h"
#include "tessera/coupled_read.h"
#include "tessera/graph.h"
#include "tessera/group.h"
#include "tessera/ids.h"
#include "tessera/idle_hook.h"
#include "tessera/loop_options.h"
#include "tessera/optimistic.h"
#include "tessera/parallel_for.h"
#include "tessera/parallel_reduce.h"
#include "tessera/resource.h"
#include "tessera/runtime.h"
#include "tessera/statistics.h"
#include "tessera/task.h"
#include "tessera/trace.h"
#include "tessera/version.h"
