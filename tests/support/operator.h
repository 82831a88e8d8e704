// Test support: out-of-band changes to the bus, made as the reconciler's own user (who may call
// the whole JetStream API), the way an operator or a foreign client would make them, and the
// bus as the observers read it.
//
// Thread-safety: one test thread per Operator.
#pragma once

#include <rapidjson/document.h>

#include <catch2/catch.hpp>
#include <memory>
#include <string>
#include <utility>

#include "observers/bus.h"
#include "observers/jetstream.h"
#include "observers/jetstream_api.h"
#include "observers/server_version.h"

namespace mesh::testing {

struct Operator {
  std::unique_ptr<observers::BusConnection> bus;

  explicit Operator(const observers::BusSettings& settings) {
    auto connected = observers::BusConnection::Connect(settings);
    REQUIRE(connected.ok());
    bus = std::move(*connected);
  }

  // The answer of a call that must succeed: `api` is the subject after "$JS.API.".
  rapidjson::Document Call(const std::string& api, const std::string& payload = "") {
    observers::ApiReply reply = bus->Request({observers::jsapi::Api(api), payload});
    REQUIRE(reply.status.ok());
    INFO(api << " " << payload << " -> " << reply.payload);
    REQUIRE_FALSE(observers::ParseApiError(reply.payload));
    rapidjson::Document doc;
    doc.Parse(reply.payload.c_str());
    REQUIRE(doc.IsObject());
    return doc;
  }

  // The "config" of an INFO answer (`info_api`, e.g. "STREAM.INFO.EVENTS").
  rapidjson::Document Config(const std::string& info_api) {
    rapidjson::Document info = Call(info_api);
    rapidjson::Document config;
    config.CopyFrom(info["config"], config.GetAllocator());
    return config;
  }

  bool AtLeast210() {
    auto version = bus->server_version();
    REQUIRE(version.has_value());
    return observers::SupportsConsumerActions(*version);
  }

  observers::ObservedJetStream Observe() {
    auto observed = observers::ObserveJetStream(*bus);
    REQUIRE(observed.ok());
    return std::move(*observed);
  }
};

}  // namespace mesh::testing
