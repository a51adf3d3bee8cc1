// A request/grant arbiter slice with the SVA checks its author keeps beside the RTL.
module handshake #(parameter int N = 4) (
  input  logic         clk,
  input  logic         rst_n,
  input  logic [N-1:0] req,
  output logic [N-1:0] gnt,
  output logic         busy
);
  logic [N-1:0] pending;

  always_ff @(posedge clk or negedge rst_n) begin
    if (!rst_n) begin
      gnt     <= '0;
      pending <= '0;
    end else begin
      pending <= req & ~gnt;
      if (|pending) gnt <= pending & -pending;
      else gnt <= '0;
    end
  end

  assign busy = |gnt;

  property p_onehot_gnt;
    @(posedge clk) disable iff (!rst_n) $onehot0(gnt);
  endproperty
  a_onehot_gnt: assert property (p_onehot_gnt) else $error("two grants at once");

  a_gnt_had_req: assert property (@(posedge clk) disable iff (!rst_n) |gnt |-> $past(|pending))
    else $error("grant without request");
  c_busy: cover property (@(posedge clk) busy);
endmodule
