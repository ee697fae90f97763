// What broker_load's command line sets: the broker, the load and its limits.
#pragma once

#include <string>

namespace broker_load {

struct Options {
  std::string broker_bin;
  std::string broker_args = "--followers 2 --replication-delay-ms 5 --retention-bytes 4194304";
  int connections = 1000;
  int producers = 20;
  int partitions = 8;
  double duration_s = 60;
  int produce_rate = 10;  // requests per second per producer
  int batch_records = 5;
  int producer_in_flight = 4;
  int acks = -1;
  int max_wait_ms = 500;
  double drain_s = 30;
  long rss_slack_mib = 20;  // allowed RSS growth after warm-up: max(20%, this)
};

}  // namespace broker_load
