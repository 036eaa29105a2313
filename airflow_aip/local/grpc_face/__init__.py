"""The local service's gRPC face: what Google's gapic clients and SDK speak by default.

:mod:`.server` serves aiplatform v1's JobService (custom and tuning jobs), PipelineService
(custom training pipelines), ModelService (the Model Registry methods the REST face serves),
MetadataService and the TensorboardService calls Experiments makes (:mod:`.metadata_routes`),
and google.longrunning.Operations; :mod:`.routes` maps each method to the REST call it is and the
handler both faces share; :mod:`.messages` converts Google's published messages to and from the
handlers' JSON; :mod:`.status` turns errors and faults into gRPC statuses with Google's details.
"""
