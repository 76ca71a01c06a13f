package import NIOCore
package import NIOHTTP1

/// The one-request HTTP/1 connections of the daemon's two small HTTP servers (the browser
/// sign-in's redirect listener and the metrics endpoint): the request must arrive within
/// `timeout` of connecting (`headReceived` is told when its head has), `respond` answers it
/// within `answerTimeout` (a sign-in's answer waits for the provider to redeem the code,
/// which may take longer than a request may take to arrive), and the connection is closed;
/// it is closed at once when the serving task is cancelled.
package enum OneRequestHTTP {
    package typealias Connection = NIOAsyncChannel<HTTPServerRequestPart, HTTPServerResponsePart>

    package static func serve(
        _ connection: Connection,
        timeout: TimeAmount,
        answerTimeout: TimeAmount = .seconds(60),
        headReceived: @Sendable () -> Void = {},
        respond: (HTTPRequestHead, NIOAsyncChannelOutboundWriter<HTTPServerResponsePart>) async throws -> Void
    ) async throws {
        let channel = connection.channel
        var deadline = channel.eventLoop.scheduleTask(in: timeout) { channel.close(promise: nil) }
        defer { deadline.cancel() }
        try await withTaskCancellationHandler {
            try await connection.executeThenClose { inbound, outbound in
                var head: HTTPRequestHead?
                for try await part in inbound {
                    switch part {
                    case .head(let requestHead):
                        head = requestHead
                        headReceived()
                    case .body:
                        continue
                    case .end:
                        guard let request = head else { return }
                        deadline.cancel()
                        deadline = channel.eventLoop.scheduleTask(in: answerTimeout) { channel.close(promise: nil) }
                        try await respond(request, outbound)
                        return
                    }
                }
            }
        } onCancel: {
            channel.close(promise: nil)
        }
    }
}
