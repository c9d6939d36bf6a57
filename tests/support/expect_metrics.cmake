# ctest helper: runs COMMAND (a ;-list), then checks that METRICS (a JSON-lines file) has train and
# eval records with the fields the issue names.
file(REMOVE "${METRICS}")
execute_process(COMMAND ${COMMAND} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err TIMEOUT 300)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "training failed (exit ${rc}):\n${out}${err}")
endif()
file(STRINGS "${METRICS}" lines)
set(train_ok FALSE)
set(eval_ok FALSE)
foreach(line IN LISTS lines)
  if(line MATCHES "\"event\": \"train\"" AND line MATCHES "\"epoch\": " AND line MATCHES "\"step\": "
     AND line MATCHES "\"loss\": " AND line MATCHES "\"lr\": " AND line MATCHES "\"img_per_sec\": ")
    set(train_ok TRUE)
  endif()
  if(line MATCHES "\"event\": \"eval\"" AND line MATCHES "\"test_loss\": " AND line MATCHES "\"test_top1\": 0?\\.?[0-9]"
     AND line MATCHES "\"test_top5\": ")
    set(eval_ok TRUE)
  endif()
endforeach()
if(NOT train_ok OR NOT eval_ok)
  message(FATAL_ERROR "metrics file ${METRICS} lacks train or eval records:\n${lines}")
endif()
message(STATUS "metrics file has train and eval records")
