# broker_load's sources, for the target that builds it: reliability_broker_load in
# tests/reliability (the CTest reliability.load_short and the manual full run).
set(PURGATORY_BROKER_LOAD_SOURCES
  ${CMAKE_CURRENT_LIST_DIR}/main.cpp
  ${CMAKE_CURRENT_LIST_DIR}/broker_process.cpp
  ${CMAKE_CURRENT_LIST_DIR}/connection.cpp
  ${CMAKE_CURRENT_LIST_DIR}/ledger.cpp
  ${CMAKE_CURRENT_LIST_DIR}/load.cpp
  ${CMAKE_CURRENT_LIST_DIR}/load_consumer.cpp
  ${CMAKE_CURRENT_LIST_DIR}/load_producer.cpp
  ${CMAKE_CURRENT_LIST_DIR}/load_stats.cpp)
