// What a page pool (core/memory/pool.h) needs to know about a model, from its exact accounting.
// It lives on the model's side so that the pool knows nothing about models.
#pragma once

#include "core/memory/pool.h"
#include "core/model/accounting.h"

namespace k3 {

PoolModel pool_model(const MemoryAccount& a);
inline PoolModel pool_model(const ModelConfig& c) { return pool_model(account_memory(c)); }

}  // namespace k3
